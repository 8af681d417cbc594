"""Unit tests of the benchmark's pure parts (bench/): parsing, statistics, budgets, reports."""
