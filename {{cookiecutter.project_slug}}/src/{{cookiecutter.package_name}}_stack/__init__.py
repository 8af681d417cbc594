"""The serving stack: nginx -> unix socket -> gunicorn with uvicorn workers, as one program.

Installed with the project and imported normally. It never imports the app: gunicorn gets the
app as ``APP_MODULE`` (``module:attribute``). The person-edited files stay in deploy/
(nginx.conf, gunicorn.conf.py); ``python -m {{ cookiecutter.package_name }}_stack`` runs it.
"""
