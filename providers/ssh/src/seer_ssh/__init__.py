"""seer-ssh: seer over SSH to a host of your own (:mod:`seer_ssh.provider`), and its test kit,
:mod:`seer_ssh.testing`.

Nothing heavy is imported here: paramiko and docker load only when the provider or the test kit
is used.
"""
