"""User-level privacy audits of the registered methods: membership attacks by the server, measured against epsilon.
"""
