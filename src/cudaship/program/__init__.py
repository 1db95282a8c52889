"""cudaship.program"""
