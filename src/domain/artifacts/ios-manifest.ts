// The over-the-air manifest iOS fetches through `itms-services://` (docs/api.md §7): a property list with one
// item whose asset is the IPA URL. Built with fast-xml-parser's builder, which escapes every text node, so a
// title or bundle id cannot break out of its <string>.

export interface ManifestInput {
  /** Absolute HTTPS URL of the IPA (under /install/). */
  softwarePackageUrl: string;
  bundleIdentifier: string;
  bundleVersion: string;
  title: string;
}

const PROLOGUE =
  '<?xml version="1.0" encoding="UTF-8"?>\n' +
  '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n';

type Node = Record<string, unknown>;
const key = (name: string): Node => ({ key: [{ "#text": name }] });
const string = (value: string): Node => ({ string: [{ "#text": value }] });
const dict = (entries: Array<[string, Node]>): Node => ({ dict: entries.flatMap(([k, v]) => [key(k), v]) });

export async function buildManifestPlist(input: ManifestInput): Promise<string> {
  // Loaded on first use, like the plist parser (docs/benchmarks.md).
  const { XMLBuilder } = await import("fast-xml-parser");
  const builder = new XMLBuilder({
    preserveOrder: true,
    ignoreAttributes: false,
    attributeNamePrefix: "@_",
    format: true,
    indentBy: "  ",
    processEntities: true,
    suppressEmptyNode: false,
  });
  const item = dict([
    [
      "assets",
      {
        array: [
          dict([
            ["kind", string("software-package")],
            ["url", string(input.softwarePackageUrl)],
          ]),
        ],
      },
    ],
    [
      "metadata",
      dict([
        ["bundle-identifier", string(input.bundleIdentifier)],
        ["bundle-version", string(input.bundleVersion)],
        ["kind", string("software")],
        ["title", string(input.title)],
      ]),
    ],
  ]);
  const plist = { plist: [dict([["items", { array: [item] }]])], ":@": { "@_version": "1.0" } };
  return PROLOGUE + String(builder.build([plist])).trim() + "\n";
}
