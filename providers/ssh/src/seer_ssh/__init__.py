"""seer-ssh: seer over SSH. For now it holds the test kit, :mod:`seer_ssh.testing`.

Nothing heavy is imported here: paramiko and docker load only when the test kit (or, later, the
provider) is used.
"""
