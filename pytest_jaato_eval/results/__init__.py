"""Results: the arm record, the store's one writer and one reader, and what is read from
stores (the pivot, statistics, pins, compare, validate, review). Never imports pytest."""
