// What GitHub Actions makes of the README's workflows (tests/deploy.rs):
//
//   node actions_glob.js steps < blocks.json   the steps of every job in
//       each YAML block, as a YAML parser reads them: [[[{uses, run, with}]]]
//   node actions_glob.js match < request.json  the files of a workspace
//       that a path input picks: {workspace, patterns, files} -> [file]
//
// Matching follows @actions/glob, which actions/upload-artifact and the
// JUnit reporters use: one pattern a line, trimmed; empty lines and lines
// starting with `#` ignored; a leading `!` excludes (each one flips it);
// a later line overrides an earlier one for the files both match; each
// pattern is resolved against the workspace and matched by minimatch with
// dot, nobrace, noext, nocomment and nonegate, so `{a,b}` is literal text;
// a pattern also picks everything under what it names
// (implicitDescendants). upload-artifact v4 leaves hidden files out unless
// include-hidden-files is true.
//
// minimatch and yaml come from NODE_PATH (installed by the test).
'use strict';

const fs = require('fs');
const path = require('path');
const { Minimatch } = require('minimatch');
const YAML = require('yaml');

const OPTIONS = { dot: true, nobrace: true, noext: true, nocomment: true, nonegate: true };

function stepLists(node, out) {
  if (Array.isArray(node)) {
    node.forEach((n) => stepLists(n, out));
  } else if (node && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === 'steps' && Array.isArray(value)) {
        out.push(value);
      } else {
        stepLists(value, out);
      }
    }
  }
}

function steps(blocks) {
  return blocks.map((text) => {
    const lists = [];
    stepLists(YAML.parse(text), lists);
    return lists.map((list) =>
      list.map((s) => ({ uses: s.uses ?? null, run: s.run ?? null, with: s.with ?? {} })),
    );
  });
}

function match({ workspace, patterns, files, includeHidden }) {
  const compiled = [];
  for (let line of patterns.split('\n')) {
    line = line.trim();
    if (line === '' || line.startsWith('#')) {
      continue;
    }
    let negate = false;
    while (line.startsWith('!')) {
      negate = !negate;
      line = line.slice(1).trim();
    }
    const absolute = path.resolve(workspace, line);
    compiled.push({ negate, mm: new Minimatch(absolute, OPTIONS) });
    if (!absolute.endsWith('/**')) {
      compiled.push({ negate, mm: new Minimatch(`${absolute}/**`, OPTIONS) });
    }
  }
  return files.filter((file) => {
    if (!includeHidden && file.split('/').some((part) => part.startsWith('.'))) {
      return false;
    }
    const absolute = path.join(workspace, file);
    let picked = false;
    for (const { negate, mm } of compiled) {
      if (mm.match(absolute)) {
        picked = !negate;
      }
    }
    return picked;
  });
}

const input = JSON.parse(fs.readFileSync(0, 'utf8'));
const modes = { steps, match };
const mode = modes[process.argv[2]];
if (!mode) {
  process.stderr.write(`usage: node actions_glob.js steps|match < input.json\n`);
  process.exit(2);
}
process.stdout.write(JSON.stringify(mode(input)));
