"""cudaship.checks"""
