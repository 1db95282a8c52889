"""cudaship.toolkit"""
