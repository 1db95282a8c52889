from cudaship.cli.main import entry

entry()
