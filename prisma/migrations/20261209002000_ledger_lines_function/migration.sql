-- The ledger lines have one definition, the stored function `ledger_lines(...)`
-- (prisma/functions/ledger_lines.sql; docs/decisions.md "The ledger lines' one definition"). The
-- view `ledger_lines` stated the same rules a second time (last in 20261206000000_monthly_partitions)
-- and goes: every reader calls the function, `FROM ledger_lines()` where it read the view. Migrations
-- carry no function, so the function is created by the migration step right after this (the files
-- in prisma/functions, applied after the migrations); in between nothing reads the ledger, and a
-- process of the previous release that does (retention's month closing, svc_books_check) fails and
-- rolls back rather than read the lines from anywhere else.
DROP VIEW "ledger_lines";
