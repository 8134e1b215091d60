# Empty on purpose: the PEM-800K reader process (pem.training.reader) imports k12vista.line_stream
# without Django or Celery. The Celery app is loaded with Django by K12VistaConfig.ready, and
# `celery -A k12vista` finds it in k12vista.celery.
