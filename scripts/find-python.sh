#!/bin/sh
# Print the path of the first working interpreter among the versions given
# (default: the supported ones, newest first). pyenv shims answer for
# versions that are installed but not selected, so its versions folder is
# searched too.
versions="${*:-3.12 3.11}"
pyenv_root="${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}"
for v in $versions; do
	for candidate in "$(command -v "python$v" 2>/dev/null)" "$pyenv_root"/versions/"$v"*/bin/"python$v"; do
		if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c 'import sys' >/dev/null 2>&1; then
			echo "$candidate"
			exit 0
		fi
	done
done
exit 1
