"""Every use case a person can trigger and every read model a screen shows, once.

Front ends (cli, tui, remote) parse input and render output; everything they do
or show is a plain function here, over the state directory, front-end neutral.
"""
