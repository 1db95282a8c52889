"""The command-line interface: one module per subcommand, each exposing a click command named ``command``."""
