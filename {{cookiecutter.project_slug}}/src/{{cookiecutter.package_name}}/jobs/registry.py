"""The job queue tasks are registered on: procrastinate's app. It holds no connection of its
own: the worker opens it on its pool (worker.py); the web app never opens it, it queues jobs in
its own transaction (defer.py)."""

import procrastinate

# Where the worker finds the tasks; a module of tasks added elsewhere goes here too.
TASK_MODULES = ["{{ cookiecutter.package_name }}.jobs.tasks"]

# No connection parameters: the worker hands its pool to open_async().
job_queue = procrastinate.App(connector=procrastinate.PsycopgConnector(), import_paths=TASK_MODULES)
