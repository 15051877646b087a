.PHONY: run test lint bench
run:
	python3.11 dev.py serve
test:
	python3.11 dev.py test
lint:
	.venv/bin/ruff check . && .venv/bin/lint-imports && .venv/bin/python manage.py makemigrations --check --dry-run
bench:
	.venv/bin/python bench/bench_estimators.py && .venv/bin/python bench/bench_recompute.py
