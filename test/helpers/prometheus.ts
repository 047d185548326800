/**
 * A strict reader of the Prometheus text exposition format (0.0.4), written from the format's description rather
 * than from our writer: every line must be a comment, a HELP/TYPE line or a well-formed sample; a family's TYPE
 * comes before its samples; histogram buckets are cumulative and end with +Inf equal to _count. Throws on the
 * first violation, so a scrape that Prometheus would reject fails the test.
 */
export interface Sample {
  labels: Record<string, string>;
  value: number;
}
export interface HistogramSeries {
  labels: Record<string, string>;
  buckets: Array<{ le: number; count: number }>;
  sum: number;
  count: number;
}
export interface Family {
  name: string;
  type: "counter" | "gauge" | "histogram" | "summary" | "untyped";
  help: string;
  samples: Sample[];
  histograms: HistogramSeries[];
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const SAMPLE_LINE = new RegExp(`^(${NAME})(\\{(.*)\\})? (\\S+)( -?\\d+)?$`);
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"\s*(,|$)/y;

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const m = LABEL.exec(text);
    if (!m) throw new Error(`bad labels in: ${line}`);
    if (m[1]! in labels) throw new Error(`repeated label ${m[1]} in: ${line}`);
    labels[m[1]!] = m[2]!.replace(/\\(\\|"|n)/g, (_, c: string) => (c === "n" ? "\n" : c));
  }
  return labels;
}

function parseValue(text: string, line: string): number {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  const n = Number(text);
  if (!Number.isFinite(n) || !/^-?[\d.eE+-]+$/.test(text)) throw new Error(`bad value in: ${line}`);
  return n;
}

export function parsePrometheus(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  if (!text.endsWith("\n")) throw new Error("the exposition must end with a newline");
  const histogramParts = new Map<string, Map<string, HistogramSeries>>();
  for (const line of text.slice(0, -1).split("\n")) {
    if (line === "") continue;
    const help = line.match(new RegExp(`^# HELP (${NAME}) (.*)$`));
    const type = line.match(new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`));
    if (help || type) {
      const name = (help ?? type)![1]!;
      const f = families.get(name) ?? { name, type: "untyped", help: "", samples: [], histograms: [] };
      if (f.samples.length || f.histograms.length) throw new Error(`HELP/TYPE after samples of ${name}`);
      if (help) f.help = help[2]!;
      if (type) f.type = type[2] as Family["type"];
      families.set(name, f);
      continue;
    }
    if (line.startsWith("#")) continue;
    const m = line.match(SAMPLE_LINE);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const [, sampleName, , labelText, valueText] = m;
    const labels = labelText ? parseLabels(labelText, line) : {};
    const value = parseValue(valueText!, line);
    const base = sampleName!.replace(/_(bucket|sum|count)$/, "");
    const hist = families.get(base);
    if (hist?.type === "histogram" && base !== sampleName) {
      const { le, ...rest } = labels;
      const key = JSON.stringify(Object.entries(rest).sort());
      const byKey = histogramParts.get(base) ?? new Map<string, HistogramSeries>();
      histogramParts.set(base, byKey);
      const series = byKey.get(key) ?? { labels: rest, buckets: [], sum: NaN, count: NaN };
      byKey.set(key, series);
      if (sampleName!.endsWith("_bucket")) {
        if (le === undefined) throw new Error(`bucket without le: ${line}`);
        series.buckets.push({ le: parseValue(le, line), count: value });
      } else if (sampleName!.endsWith("_sum")) series.sum = value;
      else series.count = value;
      continue;
    }
    const f = families.get(sampleName!);
    if (!f) throw new Error(`sample before its TYPE: ${line}`);
    f.samples.push({ labels, value });
  }
  for (const [name, byKey] of histogramParts) {
    const f = families.get(name)!;
    for (const s of byKey.values()) {
      const les = s.buckets.map((b) => b.le);
      if (les.join() !== [...les].sort((a, b) => a - b).join()) throw new Error(`${name}: buckets out of order`);
      if (les.at(-1) !== Infinity) throw new Error(`${name}: no +Inf bucket`);
      s.buckets.forEach((b, i) => {
        if (i > 0 && b.count < s.buckets[i - 1]!.count) throw new Error(`${name}: buckets not cumulative`);
      });
      if (s.buckets.at(-1)!.count !== s.count) throw new Error(`${name}: +Inf bucket differs from _count`);
      if (Number.isNaN(s.sum)) throw new Error(`${name}: no _sum`);
      f.histograms.push(s);
    }
  }
  return families;
}
