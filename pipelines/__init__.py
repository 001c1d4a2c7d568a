"""The item pipelines (dedupe.py: drop copies; store.py: store bodies) and, in
content/, the content processors the spider hands each answer to."""
