"""The serving stack: nginx -> unix socket -> gunicorn with uvicorn workers, as one program
(``python -m`` this package). It never imports the app, which gunicorn gets as ``APP_MODULE``
(``module:attribute``); the files a person edits stay in deploy/ (docs/serving.md).
"""
