"""cudaship.ci"""
