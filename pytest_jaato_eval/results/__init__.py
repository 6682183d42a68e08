"""Results: the arm record, the store that holds records, and what is read from it
(statistics, the pivot, compare/validate/merge/review). Never imports pytest."""
