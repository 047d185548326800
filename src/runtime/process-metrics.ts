/** The standard process series of Prometheus clients, read from Node's process object (for GET /metrics). */
export function nodeProcessMetrics(): string {
  const mem = process.memoryUsage();
  const cpu = process.cpuUsage();
  const startTime = Math.floor(Date.now() / 1000 - process.uptime());
  const series: Array<[name: string, type: "gauge" | "counter", help: string, value: number]> = [
    ["process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", (cpu.user + cpu.system) / 1e6],
    ["process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", mem.rss],
    ["process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", startTime],
    ["nodejs_heap_size_total_bytes", "gauge", "Process heap size from Node.js in bytes.", mem.heapTotal],
    ["nodejs_heap_size_used_bytes", "gauge", "Process heap size used from Node.js in bytes.", mem.heapUsed],
    ["nodejs_external_memory_bytes", "gauge", "Node.js external memory size in bytes.", mem.external],
  ];
  return series.map(([name, type, help, value]) => `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${value}\n`).join("");
}
