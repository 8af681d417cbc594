"""Background jobs queued in the service's PostgreSQL (docs/jobs.md): registry.py holds the
queue tasks register on, tasks.py the tasks, defer.py queues one in a request's transaction,
observe.py and recovery.py are the worker's; the worker is ../worker.py."""
