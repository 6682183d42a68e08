"""A task: task.yaml read into one frozen Task, its files, its samples, its arms, and the
checks an arm passes before it costs anything."""
