"""The judge-model layer: the shared client, prompt templates, reply parsing and the context budget."""
