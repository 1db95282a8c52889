from cudaship.cli.main import entry

if __name__ == "__main__":  # not when a worker process imports the main module
    entry()
