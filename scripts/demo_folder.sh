# Sourced by the demo scripts: fresh_demo_folder FOLDER DEFAULT MARKER SCRIPT empties FOLDER for a new demo, but
# deletes only what is the demo's own: its default folder, a folder an earlier demo marked with MARKER, or an
# empty one. Any other folder (say a folder of real runs given by mistake) is refused with nothing deleted.
fresh_demo_folder() {
  local out=$1 default=$2 marker=$3 script=$4
  if [ "$out" != "$default" ] && [ -e "$out" ] && [ ! -e "$out/$marker" ] \
     && { [ ! -d "$out" ] || [ -n "$(ls -A -- "$out")" ]; }; then
    echo "$script: $out exists and was not made by this demo; not deleting it (give a new or empty folder)" >&2
    exit 1
  fi
  rm -rf -- "$out"
}

# not_an_option FOLDER prints FOLDER, with ./ before a relative one whose name starts with "-": as it is, mkdir and
# the trainers' --output-dir would read it as an option.
not_an_option() {
  case "$1" in
    -*) printf './%s' "$1" ;;
    *) printf '%s' "$1" ;;
  esac
}
