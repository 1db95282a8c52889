"""cudaship.analysis"""
