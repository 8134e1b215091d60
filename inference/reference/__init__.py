"""The K12Vista reference protocol: what the paper's own code does, beside the
studio's protocol (docs/formats.md lists every difference).

Nothing of the reference repository lives here: its prompts are read from a
user's checkout (``prompts``), and its way of reading judge replies is written
anew (``replies``) with a literal reader instead of ``eval``.
"""
