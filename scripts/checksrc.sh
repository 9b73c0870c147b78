#!/usr/bin/env bash
# checksrc.sh - refuse C library calls that invite overflows or hide parse errors (after curl's checksrc.pl).
#
# Banned: strcpy strcat sprintf vsprintf (no bound: use snprintf or a sized copy), atoi atol (no error
# report: use strtol/strtoll with an end pointer), strtok (hidden global state: use strtok_r or a scanner),
# gets (unbounded). Comments and string/char literals are skipped, so a comment may name a banned call.
# Usage: scripts/checksrc.sh [FILE...]   (default: every .c and .h under src/). Prints file:line: message per hit,
# exits 1 if there was any.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$#" -eq 0 ]; then
    shopt -s nullglob
    set -- src/*.c src/*.h src/*/*.c src/*/*.h
    shopt -u nullglob
fi
[ "$#" -gt 0 ] || exit 0

exec perl -e '
    use strict; use warnings;
    my %why = (
        strcpy => "use a bounded copy (snprintf, memcpy with a length)",
        strcat => "use a bounded append (snprintf)",
        sprintf => "use snprintf",
        vsprintf => "use vsnprintf",
        atoi => "use strtol with an end pointer and range check",
        atol => "use strtol/strtoll with an end pointer and range check",
        strtok => "use strtok_r or an explicit scanner",
        gets => "use fgets",
    );
    my $banned = join "|", sort keys %why;
    my $bad = 0;
    for my $file (@ARGV) {
        open my $fh, "<", $file or die "checksrc: $file: $!\n";
        local $/; my $src = <$fh>; close $fh;
        # Blank out comments and literals but keep newlines, so line numbers stay true.
        $src =~ s{
            ( /\*.*?\*/ | //[^\n]* | "(?:\\.|[^"\\\n])*" | \x27(?:\\.|[^\x27\\\n])*\x27 )
        }{ my $m = $1; $m =~ s/[^\n]/ /g; $m }gsex;
        my $line = 0;
        for my $text (split /\n/, $src, -1) {
            $line++;
            while ($text =~ /(?<![.>\w])($banned)\b/g) {
                # "->name" and ".name" are members, not calls of the library function.
                my $pre = substr($text, 0, $-[1]);
                next if $pre =~ /(->|\.)\s*$/;
                print "$file:$line: $1 is banned: $why{$1}\n";
                $bad = 1;
            }
        }
    }
    exit $bad;
' -- "$@"
