if __name__ == "__main__":  # not when a worker process imports the main module (nothing to import then)
    from cudaship.cli.main import entry

    entry()
