collect_ignore = ["tasks"]  # task sets the parity test runs through both engines
