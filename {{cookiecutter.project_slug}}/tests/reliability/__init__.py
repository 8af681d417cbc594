"""Reliability and security battery: reloads, faults, hostile clients, fuzzing, load."""
