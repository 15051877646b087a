FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=oversight_site.settings.production
WORKDIR /app
COPY pyproject.toml README.md ./
COPY oversight_site oversight_site
COPY annotations annotations
COPY assistants assistants
COPY estimators estimators
RUN pip install --no-cache-dir .
COPY . .
RUN DJANGO_SECRET_KEY=build DJANGO_ALLOWED_HOSTS=build \
    python manage.py collectstatic --no-input -v 0
EXPOSE 8000
CMD ["gunicorn", "oversight_site.wsgi", "-b", "0.0.0.0:8000", "-w", "4", "--timeout", "120", \
     "--access-logfile", "-"]
