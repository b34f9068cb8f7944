"""The world's state as the steps of an episode read and changed it.

- ``steps``: the models of one step's recall (what it read) and change (what it did);
- ``text``: their short text form, the world model's blocks before its answer;
- ``compare``: one step's state against another's (the model's against the sandbox's).
"""
