"""cudaship.knowledge"""
