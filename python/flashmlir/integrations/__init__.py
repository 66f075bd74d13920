"""Integrations with other libraries (imported on demand):

- `flashmlir.integrations.transformers`: "flashmlir" as a Hugging Face
  transformers attention implementation.
"""
