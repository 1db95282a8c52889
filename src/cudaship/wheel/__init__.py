"""cudaship.wheel"""
