import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * `packer` for the local runner when the real one is not installed. `init` and `validate` pass;
 * `build` does what its `-var mode=…` says:
 * - `env`: prints its environment, one `NAME=value` a line;
 * - `lines`: prints `count` numbered lines, then `fake builder: finished <count> lines`, the way
 *   buildah 1.28 does under load: its stdout is non-blocking and, when a write cannot go on for
 *   `patience_ms`, it drops the rest of its output and still exits 0;
 * - `flood`: prints lines for ever;
 * - `pause`: prints `building`, sleeps `seconds`, exits 0 without another word.
 */
const PACKER = String.raw`#!/usr/bin/perl
use strict;
use warnings;
use Fcntl;

my $command = shift @ARGV // '';
my %var;
while (@ARGV) {
  my $arg = shift @ARGV;
  if ($arg eq '-var') {
    my ($name, $value) = split /=/, shift(@ARGV), 2;
    $var{$name} = $value;
  }
}
exit 0 unless $command eq 'build';
my $mode = $var{mode} // 'env';
$| = 1;

if ($mode eq 'env') {
  print "$_=$ENV{$_}\n" for sort keys %ENV;
  exit 0;
}
if ($mode eq 'pause') {
  print "building\n";
  sleep($var{seconds} // 3);
  exit 0;
}
if ($mode eq 'flood') {
  my $line = 'flood ' . ('x' x 100) . "\n";
  print $line while 1;
}

my $count = $var{count} // 1000;
my $patience = ($var{patience_ms} // 50) / 1000;
my $flags = fcntl(STDOUT, F_GETFL, 0);
fcntl(STDOUT, F_SETFL, $flags | O_NONBLOCK);

sub put {
  my ($data) = @_;
  while (length $data) {
    my $n = syswrite(STDOUT, $data);
    if (defined $n) {
      substr($data, 0, $n) = '';
      next;
    }
    return 0 unless $!{EAGAIN};
    my $writable = '';
    vec($writable, fileno(STDOUT), 1) = 1;
    return 0 unless select(undef, $writable, undef, $patience);
  }
  return 1;
}

my $chunk = '';
for my $i (1 .. $count) {
  $chunk .= "$i\n";
  next if length($chunk) < 8192 && $i < $count;
  exit 0 unless put($chunk);
  $chunk = '';
}
put("fake builder: finished $count lines\n");
exit 0;
`;

/** `pack` that prints its environment, one `NAME=value` a line, and succeeds. */
const PACK = `#!/bin/sh
env | sort
`;

/** A directory holding the fake `pack` and `packer`, to put first on kiln's PATH. */
export function fakeBuilderBin(): string {
  const dir = mkdtempSync('/dev/shm/kiln-fake-bin-');
  for (const [name, script] of [
    ['packer', PACKER],
    ['pack', PACK],
  ] as const) {
    writeFileSync(join(dir, name), script);
    chmodSync(join(dir, name), 0o755);
  }
  return dir;
}
