"""Importing this module makes the process ignore Ctrl-C (SIGINT) and SIGTERM.

The actors' fork server imports it first of all (`local._actor_process_context` puts it at the head of
the server's preload list), so the server and every actor it forks ignore both: a signal sent to the
whole process group (a terminal's Ctrl-C; `timeout`, systemd or a batch scheduler's SIGTERM) reaches
only the learner, which saves the run and then stops the actors. Were the fork server killed instead,
every actor would look dead to the learner (their exit statuses come through the server), and it would
spend its restarts on them and end the run with an error, unsaved.

Never import it in a learner. It is a module because a module name is what the fork server's preload
list takes: multiprocessing starts the server, and no code of ours runs in it before its preloads.
"""

import signal

for _signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_signum, signal.SIG_IGN)
