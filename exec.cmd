@rem Windows stand-in for the POSIX shell's `exec` in package.json's start script ("exec node
@rem dist/scripts/start.js"): npm runs scripts with cmd.exe there, which finds this file in the
@rem project folder and runs the rest of the line. On Linux and macOS, sh's own exec replaces the
@rem shell with node, so SIGINT sent to npm's pid reaches the script (sh would hold it otherwise).
@%*
