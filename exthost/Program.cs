using System.Text.Json;
using Microsoft.Azure.WebJobs;
using Microsoft.Azure.WebJobs.Extensions.DurableTask;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;

namespace ExtHost;

public static class Program
{
    public static async Task<int> Main(string[] args)
    {
        bool smoke = args.Contains("--smoke");
        string appRoot = Path.GetFullPath(ArgValue(args, "--app-root") ?? Directory.GetCurrentDirectory());
        var hostJson = HostJson.Flatten(Path.Combine(appRoot, "host.json"));

        var builder = new HostBuilder()
            .ConfigureAppConfiguration(c =>
            {
                c.AddInMemoryCollection(hostJson);
                c.AddEnvironmentVariables();
            })
            .ConfigureLogging(l =>
            {
                l.AddSimpleConsole(o => { o.SingleLine = true; o.TimestampFormat = "HH:mm:ss.fff "; });
                l.SetMinimumLevel(LogLevel.Information);
                l.AddFilter("Azure.Core", LogLevel.Warning);
                l.AddFilter("Host.Triggers.DurableTask", LogLevel.Information);
                l.AddFilter("DurableTask.AzureStorage", LogLevel.Warning);
                l.AddFilter("DurableTask.Core", LogLevel.Warning);
            })
            .ConfigureWebJobs(b =>
            {
                b.AddAzureStorageCoreServices();
                b.AddAzureStorageQueues();
                b.AddDurableTask();
            })
            .ConfigureServices(s =>
            {
                s.AddSingleton<ITypeLocator>(new ExplicitTypeLocator(typeof(SmokeFunctions)));
            });

        using var host = builder.Build();
        await host.StartAsync();
        if (smoke)
        {
            var jobHost = host.Services.GetRequiredService<IJobHost>();
            await jobHost.CallAsync("SmokeStart", new Dictionary<string, object?> { ["instanceId"] = "smoke-" + Guid.NewGuid().ToString("N")[..8] });
            await host.StopAsync();
            return 0;
        }
        await host.WaitForShutdownAsync();
        return 0;
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
