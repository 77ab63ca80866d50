using System.Text.Json;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.Azure.WebJobs;
using Microsoft.Azure.WebJobs.Extensions.DurableTask;
using Microsoft.Azure.WebJobs.Extensions.Timers;
using Microsoft.Azure.WebJobs.Host;
using Microsoft.Azure.WebJobs.Host.Config;
using Microsoft.Azure.WebJobs.Host.Executors;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;

namespace ExtHost;

/// <summary>
/// `dotnet ExtHost.dll [--app-root DIR] [--port 7071] [--host-id ID] [--instance-id ID] [--main GLOB] [--worker JS] [--node EXE] [--smoke]`:
/// the app's functions on the real WebJobs extensions (Durable over Azure Storage, queues, timers),
/// run by a Node.js worker (devhost's loader). See exthost/README.md.
/// </summary>
public static class Program
{
    public const string ReadyPrefix = "Extensions host listening on ";

    public static async Task<int> Main(string[] args)
    {
        try
        {
            return await Run(args);
        }
        catch (Exception e)
        {
            Console.Error.WriteLine($"exthost: {e.GetType().Name}: {e.Message}");
            Console.Error.WriteLine(e);
            return 1;
        }
    }

    static async Task<int> Run(string[] args)
    {
        bool smoke = args.Contains("--smoke");
        string appRoot = Path.GetFullPath(ArgValue(args, "--app-root") ?? Directory.GetCurrentDirectory());
        int port = int.Parse(ArgValue(args, "--port") ?? "7071");
        string hostId = ArgValue(args, "--host-id") ?? "leader-coordinator";
        string instanceId = ArgValue(args, "--instance-id") ?? $"{Environment.MachineName}:{port}";
        string workerJs = Path.GetFullPath(ArgValue(args, "--worker") ?? Path.Combine(appRoot, "devhost", "dist", "src", "worker", "workerMain.js"));
        string node = ArgValue(args, "--node") ?? "node";
        string? main = ArgValue(args, "--main");

        // Like `func start`: local.settings.json Values fill the environment, never overriding it.
        LocalSettings.Load(Path.Combine(appRoot, "local.settings.json"));
        // The Durable extension picks its out-of-proc protocol from this (OrchestratorShim for node).
        Environment.SetEnvironmentVariable("FUNCTIONS_WORKER_RUNTIME", Environment.GetEnvironmentVariable("FUNCTIONS_WORKER_RUNTIME") ?? "node");
        var hostJson = HostJson.Flatten(Path.Combine(appRoot, "host.json"));
        // The extension's LocalHttpListener is a WebHost of its own that logs every RPC request at
        // Information on the console; these settings reach it (its WebHostBuilder reads ASPNETCORE_*).
        foreach (var name in new[] { "ASPNETCORE_Logging__LogLevel__Default", "Logging__LogLevel__Default" })
            Environment.SetEnvironmentVariable(name, Environment.GetEnvironmentVariable(name) ?? "Warning");
        // Not an App Service / Linux Consumption container, whatever this machine's environment says:
        // the extension would otherwise switch to Consumption defaults and its Linux event log lines.
        var notAzure = new Dictionary<string, string?>
        {
            ["CONTAINER_NAME"] = "",
            ["WEBSITE_INSTANCE_ID"] = "",
            ["WEBSITE_SKU"] = "",
            // The provider names its worker Environment.MachineName unless these two are set
            // (AzureStorageDurabilityProviderFactory: WorkerId = "{stamp}:{roleInstance}", as App
            // Service sets them). Its table partition manager tells owners apart by that name, so
            // two processes on one machine would both own every control queue (split brain); on
            // Azure every instance has a name of its own, and so does each process here.
            ["WEBSITE_CURRENT_STAMPNAME"] = "exthost",
            ["RoleInstanceId"] = $"{Environment.MachineName}-{instanceId}-{Environment.ProcessId}",
        };

        NodeWorker? worker = null;
        Type functionsType = typeof(SmokeFunctions);
        List<WorkerFunction> httpFunctions = [];
        if (!smoke)
        {
            if (!File.Exists(workerJs)) throw new FileNotFoundException($"the Node.js worker {workerJs} is missing: build first (npm run build)");
            var workerEnv = new Dictionary<string, string?>
            {
                ["WEBSITE_INSTANCE_ID"] = Environment.GetEnvironmentVariable("WEBSITE_INSTANCE_ID") ?? instanceId,
                ["AzureFunctionsWebHost__hostid"] = Environment.GetEnvironmentVariable("AzureFunctionsWebHost__hostid") ?? hostId,
                ["WEBSITE_HOSTNAME"] = Environment.GetEnvironmentVariable("WEBSITE_HOSTNAME") ?? $"127.0.0.1:{port}",
            };
            worker = await NodeWorker.StartAsync(node, workerJs, appRoot, main, workerEnv, CancellationToken.None);
            var functions = await worker.ListAsync();
            Bridge.Initialize(worker, functions);
            var emitted = FunctionEmitter.Emit(functions);
            functionsType = emitted.Type;
            httpFunctions = functions.Where(f => emitted.Http.Contains(f.Name)).ToList();
        }

        string routePrefix = hostJson.GetValueOrDefault("AzureWebJobs:extensions:http:routePrefix") ?? "api";
        var keys = FunctionKeys.FromEnvironment(Environment.GetEnvironmentVariable);
        if (keys.GeneratedSystemKey)
            Console.Error.WriteLine($"exthost: keys are on and DEVHOST_SYSTEM_KEYS has no {FunctionKeys.DurableSystemKeyName} key: one was generated for this process, so other instances do not know it");
        var baseUrl = new Uri($"http://127.0.0.1:{port}");
        var builder = new HostBuilder()
            .UseConsoleLifetime(o => o.SuppressStatusMessages = true)
            .ConfigureAppConfiguration(c =>
            {
                c.AddInMemoryCollection(hostJson);
                c.AddEnvironmentVariables();
                c.AddInMemoryCollection(notAzure);
            })
            .ConfigureLogging((ctx, l) =>
            {
                l.AddSimpleConsole(o => { o.SingleLine = true; o.TimestampFormat = "HH:mm:ss.fff "; });
                l.SetMinimumLevel(LogLevel.Information);
                // Azure.Core logs every 404/409 answer (a container that exists, a blob not yet written)
                // as a warning; the SDK's exceptions still surface where they matter.
                l.AddFilter("Azure.Core", LogLevel.Error);
                l.AddFilter("Microsoft.AspNetCore", LogLevel.Warning);
                l.AddFilter("Microsoft.Azure.WebJobs.Hosting.OptionsLoggingService", LogLevel.Warning);
                // EXTHOST_LOG_DURABLE=1: the extension's and the provider's information lines
                // (partition leases, messages, episodes).
                var durableLevel = Environment.GetEnvironmentVariable("EXTHOST_LOG_DURABLE") == "1" ? LogLevel.Information : LogLevel.Warning;
                l.AddFilter("Host.Triggers.DurableTask", durableLevel);
                l.AddFilter("DurableTask.AzureStorage", durableLevel);
                l.AddFilter("DurableTask.Core", durableLevel);
                // EXTHOST_LOG_FUNCTIONS=1: every invocation's "Executing"/"Executed ... Duration" lines.
                if (Environment.GetEnvironmentVariable("EXTHOST_LOG_FUNCTIONS") != "1")
                {
                    l.AddFilter("Function", LogLevel.Warning);
                    l.AddFilter("Host.Results", LogLevel.Warning);
                    l.AddFilter("Host.Executor", LogLevel.Warning);
                }
            })
            .ConfigureWebJobs(b =>
            {
                b.AddAzureStorageCoreServices();
                b.AddAzureStorageQueues();
                b.AddTimers();
                b.AddDurableTask();
            })
            .ConfigureServices(s =>
            {
                s.AddSingleton<ITypeLocator>(new ExplicitTypeLocator(functionsType));
                s.AddSingleton<IWebHookProvider>(new LocalWebHookProvider(() => baseUrl, keys.SystemKey(FunctionKeys.DurableSystemKeyName)));
                s.AddSingleton<IHostIdProvider>(new FixedHostIdProvider(hostId));
                s.AddSingleton<ScheduleMonitor>(new BlobScheduleMonitor(Environment.GetEnvironmentVariable("AzureWebJobsStorage") ?? "UseDevelopmentStorage=true", hostId));
                if (hostJson.GetValueOrDefault("AzureWebJobs:functionTimeout") is string timeout && TimeSpan.TryParse(timeout, out var limit) && limit > TimeSpan.Zero)
                {
                    s.Configure<JobHostFunctionTimeoutOptions>(o => { o.Timeout = limit; o.ThrowOnTimeout = true; o.TimeoutWhileDebugging = true; });
                }
                // A timed-out call fails and the host goes on serving (TimeoutHandler.cs says why).
                s.AddSingleton<Microsoft.Azure.WebJobs.Host.Timers.IWebJobsExceptionHandler, TimeoutHandler>();
            });
        if (!smoke)
        {
            builder.ConfigureWebHost(w => w
                .UseKestrel(k => k.Limits.MaxRequestBodySize = 100 * 1024 * 1024)
                .UseUrls(baseUrl.ToString())
                .ConfigureServices(s => s.AddRouting())
                .Configure(app =>
                {
                    app.UseRouting();
                    var services = app.ApplicationServices;
                    var logger = services.GetRequiredService<ILoggerFactory>().CreateLogger("ExtHost.Http");
                    app.UseEndpoints(e => HttpFront.Map(e, routePrefix, httpFunctions, keys,
                        () => services.GetRequiredService<IJobHost>(),
                        () => services.GetServices<IExtensionConfigProvider>().OfType<IAsyncConverter<HttpRequestMessage, HttpResponseMessage>>().First(),
                        logger));
                }));
        }

        using var host = builder.Build();
        try
        {
            worker?.OnUnexpectedExit(code =>
            {
                Console.Error.WriteLine($"exthost: the Node.js worker exited (code {code}); stopping the host");
                Environment.ExitCode = 1;
                host.Services.GetRequiredService<IHostApplicationLifetime>().StopApplication();
            });
            await host.StartAsync();
            if (smoke)
            {
                var jobHost = host.Services.GetRequiredService<IJobHost>();
                await jobHost.CallAsync("SmokeStart", new Dictionary<string, object?> { ["instanceId"] = "smoke-" + Guid.NewGuid().ToString("N")[..8] });
                await host.StopAsync();
                return 0;
            }
            Console.WriteLine($"{ReadyPrefix}{baseUrl.ToString().TrimEnd('/')}");
            await host.WaitForShutdownAsync();
            return Environment.ExitCode;
        }
        finally
        {
            if (worker is not null) await worker.DisposeAsync();
        }
    }

    static string? ArgValue(string[] args, string name)
    {
        int i = Array.IndexOf(args, name);
        return i >= 0 && i + 1 < args.Length ? args[i + 1] : null;
    }
}

sealed class ExplicitTypeLocator(params Type[] types) : ITypeLocator
{
    public IReadOnlyList<Type> GetTypes() => types;
}

sealed class FixedHostIdProvider(string hostId) : IHostIdProvider
{
    public Task<string> GetHostIdAsync(CancellationToken cancellationToken) => Task.FromResult(hostId);
}

static class LocalSettings
{
    public static void Load(string path)
    {
        if (!File.Exists(path)) return;
        using var doc = JsonDocument.Parse(File.ReadAllText(path), new JsonDocumentOptions { CommentHandling = JsonCommentHandling.Skip, AllowTrailingCommas = true });
        if (!doc.RootElement.TryGetProperty("Values", out var values) || values.ValueKind != JsonValueKind.Object) return;
        foreach (var p in values.EnumerateObject())
        {
            if (Environment.GetEnvironmentVariable(p.Name) is not null) continue;
            Environment.SetEnvironmentVariable(p.Name, p.Value.ValueKind == JsonValueKind.String ? p.Value.GetString() : p.Value.GetRawText());
        }
    }
}

/// <summary>host.json as the Functions host hands it to the WebJobs extensions: `extensions.X` under `AzureWebJobs:extensions:X`.</summary>
static class HostJson
{
    public static Dictionary<string, string?> Flatten(string path)
    {
        var result = new Dictionary<string, string?>(StringComparer.OrdinalIgnoreCase);
        if (!File.Exists(path)) return result;
        using var doc = JsonDocument.Parse(File.ReadAllText(path), new JsonDocumentOptions { CommentHandling = JsonCommentHandling.Skip });
        foreach (var prop in doc.RootElement.EnumerateObject())
        {
            if (prop.NameEquals("extensions")) Walk(prop.Value, "AzureWebJobs:extensions", result);
            else Walk(prop.Value, "AzureWebJobs:" + prop.Name, result);
        }
        return result;
    }

    static void Walk(JsonElement e, string prefix, Dictionary<string, string?> into)
    {
        switch (e.ValueKind)
        {
            case JsonValueKind.Object:
                foreach (var p in e.EnumerateObject()) Walk(p.Value, prefix + ":" + p.Name, into);
                break;
            case JsonValueKind.Array:
                int i = 0;
                foreach (var item in e.EnumerateArray()) Walk(item, prefix + ":" + i++, into);
                break;
            case JsonValueKind.Null:
                into[prefix] = null;
                break;
            default:
                into[prefix] = e.ValueKind == JsonValueKind.String ? e.GetString() : e.GetRawText();
                break;
        }
    }
}
