FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=oversight_site.settings.production
WORKDIR /app
# The locked versions (hashes checked), the same set CI tests: python3.11 dev.py lock
# re-resolves requirements/*.lock. The code runs from /app, not as an installed package.
COPY requirements/production.lock requirements/production.lock
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements/production.lock
COPY . .
RUN DJANGO_SECRET_KEY=build DJANGO_ALLOWED_HOSTS=build \
    python manage.py collectstatic --no-input -v 0
EXPOSE 8000
CMD ["gunicorn", "oversight_site.wsgi", "-b", "0.0.0.0:8000", "-w", "4", "--timeout", "120", \
     "--access-logfile", "-"]
