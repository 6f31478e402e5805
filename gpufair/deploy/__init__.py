"""The files an admin installs beside the package: config, systemd unit, tmpfiles.d,
``job_submit.lua``, the Prolog/Epilog wrapper, the slurm.conf lines and an example snapshot.

They ship inside the package (package data), because after ``pip install`` a source tree's
``etc/`` is nowhere; ``gpufair admin write-files`` (:mod:`gpufair.deploy.files`) writes them
where they belong, filled in for this install (its interpreter, the daemon's user).
"""
