using System.Diagnostics;
using System.Net.Http.Headers;
using System.Text;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace ExtHost;

/// <summary>A function as the Node.js worker reports it (devhost's HostedFunction).</summary>
public sealed class WorkerFunction
{
    [JsonProperty("name")] public string Name { get; set; } = "";
    [JsonProperty("triggerType")] public string TriggerType { get; set; } = "";
    [JsonProperty("triggerName")] public string TriggerName { get; set; } = "";
    [JsonProperty("bindings")] public Dictionary<string, JObject> Bindings { get; set; } = new();
}

/// <summary>
/// The Node.js worker process (devhost/dist/src/worker/workerMain.js): started and stopped with this
/// host, reached over loopback HTTP (the role of the Functions host's gRPC channel).
/// </summary>
public sealed class NodeWorker : IAsyncDisposable
{
    public const string ReadyPrefix = "Extension worker listening on ";
    readonly Process process;
    readonly HttpClient http;

    NodeWorker(Process process, Uri baseUri)
    {
        this.process = process;
        http = new HttpClient(new SocketsHttpHandler { MaxConnectionsPerServer = 256, PooledConnectionIdleTimeout = TimeSpan.FromSeconds(30) })
        {
            BaseAddress = baseUri,
            Timeout = Timeout.InfiniteTimeSpan,
        };
    }

    public static async Task<NodeWorker> StartAsync(string nodeExe, string workerJs, string appRoot, string? main, IDictionary<string, string?> env, CancellationToken cancel)
    {
        var psi = new ProcessStartInfo(nodeExe)
        {
            // Held open and never written: its end tells the worker this host is gone (--exit-with-stdin).
            RedirectStandardInput = true,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
            WorkingDirectory = appRoot,
        };
        psi.ArgumentList.Add(workerJs);
        psi.ArgumentList.Add("--app-root");
        psi.ArgumentList.Add(appRoot);
        psi.ArgumentList.Add("--exit-with-stdin");
        if (main is not null)
        {
            psi.ArgumentList.Add("--main");
            psi.ArgumentList.Add(main);
        }
        foreach (var (k, v) in env) psi.Environment[k] = v;
        var process = Process.Start(psi) ?? throw new InvalidOperationException($"could not start {nodeExe}");
        var ready = new TaskCompletionSource<Uri>(TaskCreationOptions.RunContinuationsAsynchronously);
        process.OutputDataReceived += (_, e) =>
        {
            if (e.Data is null) return;
            if (!ready.Task.IsCompleted && e.Data.StartsWith(ReadyPrefix, StringComparison.Ordinal))
            {
                ready.TrySetResult(new Uri(e.Data[ReadyPrefix.Length..].Trim()));
                return;
            }
            // Unprefixed: the app's and the loader's lines are JSON, as on the development host.
            Console.Out.WriteLine(e.Data);
        };
        process.ErrorDataReceived += (_, e) => { if (e.Data is not null) Console.Error.WriteLine(e.Data); };
        process.EnableRaisingEvents = true;
        process.Exited += (_, _) => ready.TrySetException(new InvalidOperationException($"the Node.js worker exited with code {process.ExitCode} before it was ready"));
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        using var timeout = CancellationTokenSource.CreateLinkedTokenSource(cancel);
        timeout.CancelAfter(TimeSpan.FromSeconds(60));
        using (timeout.Token.Register(() => ready.TrySetException(new TimeoutException("the Node.js worker did not print its URL within 60 s"))))
        {
            return new NodeWorker(process, await ready.Task);
        }
    }

    public int ProcessId => process.Id;

    /// <summary>Called once if the worker exits on its own (the host then stops: no worker restarts here).</summary>
    public void OnUnexpectedExit(Action<int> handler) => process.Exited += (_, _) => { if (!disposing) handler(process.ExitCode); };
    volatile bool disposing;
    public bool HasExited => process.HasExited;

    public async Task<List<WorkerFunction>> ListAsync()
    {
        var text = await http.GetStringAsync("functions").ConfigureAwait(false);
        return JsonConvert.DeserializeObject<List<WorkerFunction>>(text) ?? [];
    }

    /// <summary>Invokes a function in the worker: `{ returnValue, outputs }`, or throws its error as an RpcException (RpcException.cs).</summary>
    public async Task<JObject> InvokeAsync(string name, JToken? trigger, JObject? triggerMetadata = null, JObject? inputs = null, CancellationToken cancel = default)
    {
        var body = new JObject { ["name"] = name, ["trigger"] = trigger ?? JValue.CreateNull() };
        if (triggerMetadata is not null) body["triggerMetadata"] = triggerMetadata;
        if (inputs is not null) body["inputs"] = inputs;
        using var content = new StringContent(body.ToString(Formatting.None), Encoding.UTF8);
        content.Headers.ContentType = new MediaTypeHeaderValue("application/json");
        using var response = await http.PostAsync("invoke", content, cancel).ConfigureAwait(false);
        var text = await response.Content.ReadAsStringAsync(cancel).ConfigureAwait(false);
        var parsed = JsonConvert.DeserializeObject<JObject>(text, new JsonSerializerSettings { DateParseHandling = DateParseHandling.None }) ?? new JObject();
        if (!response.IsSuccessStatusCode)
        {
            var error = parsed["error"] as JObject;
            throw new Microsoft.Azure.WebJobs.Script.Workers.Rpc.RpcException(error?.Value<string>("message") ?? $"worker answered {(int)response.StatusCode}", error?.Value<string>("stack"));
        }
        return parsed;
    }

    [System.Runtime.InteropServices.DllImport("libc", EntryPoint = "kill", SetLastError = true)]
    static extern int SysKill(int pid, int signal);

    public async ValueTask DisposeAsync()
    {
        disposing = true;
        http.Dispose();
        if (process.HasExited) return;
        try
        {
            // SIGTERM: the worker drains its invocations and runs the app's appTerminate hooks.
            if (OperatingSystem.IsWindows()) process.Kill(entireProcessTree: true);
            else _ = SysKill(process.Id, 15);
            using var wait = new CancellationTokenSource(TimeSpan.FromSeconds(15));
            await process.WaitForExitAsync(wait.Token);
            // The parameterless wait returns once the redirected output has been read to its end, so
            // the worker's last lines (a graceful stop's `leader.released`) are printed before this host exits.
            process.WaitForExit();
        }
        catch (Exception)
        {
            if (!process.HasExited) process.Kill(entireProcessTree: true);
        }
    }
}
