"""Helpers shared by the test modules.

Test modules never import one another: what more than one of them uses lives
here, one module per concern. ``tests/conftest.py`` puts ``tests/`` on
``sys.path``, so a test imports ``helpers.<module>`` wherever it lives.
"""
