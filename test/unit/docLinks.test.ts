/**
 * Every relative link in README.md and docs/*.md points at a file that exists, and every `#anchor`
 * at a heading of the file it names (GitHub's heading slugs). Guarantees: moving a section between
 * the README and docs/ cannot leave a dead link behind. Not checked: external URLs, and links inside
 * code blocks (which are not links).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, it } from 'node:test';

const REPO_ROOT = join(__dirname, '..', '..', '..');

/** The text outside fenced code blocks: a `# comment` in a bash block is not a heading. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const match of prose(markdown).matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const text = (match[1] as string).replace(/`/g, '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** Relative link targets (`[text](target)`) outside code blocks and inline code. */
function relativeLinks(markdown: string): string[] {
  const text = prose(markdown).replace(/``[^`]*``|`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((m) => m[1] as string)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

const files = ['README.md', ...readdirSync(join(REPO_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];

describe('links in README.md and docs/', () => {
  it('the slug rule gives the anchors GitHub gives', () => {
    const anchors = headingAnchors('# A: b, c (D)\n```bash\n# not a heading\n```\n## host.json, value by value\n## A: b, c (D)\n');
    assert.deepEqual([...anchors], ['a-b-c-d', 'hostjson-value-by-value', 'a-b-c-d-1']);
  });

  it('every relative link names an existing file, and an existing heading when it has an anchor', () => {
    const problems: string[] = [];
    let checked = 0;
    for (const file of files) {
      const markdown = readFileSync(join(REPO_ROOT, file), 'utf8');
      for (const target of relativeLinks(markdown)) {
        checked += 1;
        const [path = '', anchor] = target.split('#', 2);
        const resolved = path === '' ? join(REPO_ROOT, file) : join(REPO_ROOT, dirname(file), decodeURIComponent(path));
        if (!existsSync(resolved)) {
          problems.push(`${file}: ${target}: no such file`);
          continue;
        }
        if (anchor === undefined || anchor === '') continue;
        if (!resolved.endsWith('.md') || statSync(resolved).isDirectory()) {
          problems.push(`${file}: ${target}: an anchor into a file that is not markdown`);
          continue;
        }
        if (!headingAnchors(readFileSync(resolved, 'utf8')).has(anchor)) {
          problems.push(`${file}: ${target}: ${relative(REPO_ROOT, resolved)} has no heading with that anchor`);
        }
      }
    }
    assert.ok(checked >= 20, `only ${checked} relative links found: the link pattern no longer matches`);
    assert.deepEqual(problems, []);
  });
});
