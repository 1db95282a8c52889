"""Renderers: turn records and findings into text, JSON, JUnit, Markdown or HTML. They never decide."""
