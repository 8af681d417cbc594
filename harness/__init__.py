"""The one harness the battery, the lab and the template's tests start things through.

ports.py: free ports and deadlines; procfs.py: what /proc says about processes;
processes.py: process groups started and stopped whole; stack.py: a serving stack, started
through its command line (`python -m serving_stack`); http.py: raw HTTP/1.1 exchanges;
postgres.py: a project's own throwaway PostgreSQL.

Standard library only: it runs in the template's environment (battery/, tests/) and in a
generated project's (lab/, python -m lab), and never imports the project's packages.
"""
