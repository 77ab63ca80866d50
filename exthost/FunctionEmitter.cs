using System.Reflection;
using System.Reflection.Emit;
using Azure.Storage.Queues.Models;
using Microsoft.Azure.WebJobs;
using Microsoft.Azure.WebJobs.Extensions.DurableTask;

namespace ExtHost;

/// <summary>
/// Registers the app's functions with the WebJobs host the way the Functions host does for a
/// non-.NET app: one generated method per function, its trigger parameter carrying the real
/// extension's attribute (OrchestrationTrigger, ActivityTrigger, QueueTrigger, TimerTrigger; HTTP
/// functions are called by the HTTP front through JobHost.CallAsync), each calling Bridge.
/// </summary>
public static class FunctionEmitter
{
    public sealed record Emitted(Type Type, IReadOnlyList<string> Http);

    public static Emitted Emit(IEnumerable<WorkerFunction> functions)
    {
        var assembly = AssemblyBuilder.DefineDynamicAssembly(new AssemblyName("ExtHost.AppFunctions"), AssemblyBuilderAccess.Run);
        var module = assembly.DefineDynamicModule("ExtHost.AppFunctions");
        // "Host.Functions", as the Functions host names it: timer status blobs and listener locks are
        // then named as on Azure (Host.Functions.{name}).
        var type = module.DefineType("Host.Functions", TypeAttributes.Public | TypeAttributes.Abstract | TypeAttributes.Sealed | TypeAttributes.Class);
        var http = new List<string>();
        foreach (var fn in functions)
        {
            var trigger = fn.Bindings[fn.TriggerName];
            switch (fn.TriggerType)
            {
                case "orchestrationTrigger":
                    Define(type, fn.Name, nameof(Bridge.Orchestrator), typeof(string),
                        Attribute<OrchestrationTriggerAttribute>([], ("Orchestration", fn.Name)), withBinder: false);
                    break;
                case "activityTrigger":
                    Define(type, fn.Name, nameof(Bridge.Activity), typeof(IDurableActivityContext),
                        Attribute<ActivityTriggerAttribute>([], ("Activity", fn.Name)), withBinder: true);
                    break;
                case "queueTrigger":
                    Define(type, fn.Name, nameof(Bridge.Queue), typeof(QueueMessage),
                        Attribute<QueueTriggerAttribute>([Required(trigger, "queueName", fn)], ("Connection", trigger.Value<string>("connection"))), withBinder: true);
                    break;
                case "timerTrigger":
                    Define(type, fn.Name, nameof(Bridge.Timer), typeof(TimerInfo),
                        Attribute<TimerTriggerAttribute>([Required(trigger, "schedule", fn)],
                            ("RunOnStartup", trigger.Value<bool?>("runOnStartup") ?? false),
                            ("UseMonitor", trigger.Value<bool?>("useMonitor") ?? true)), withBinder: true);
                    break;
                case "httpTrigger":
                    Define(type, fn.Name, nameof(Bridge.Http), typeof(HttpCall), null, withBinder: true, manual: true);
                    http.Add(fn.Name);
                    break;
                default:
                    throw new NotSupportedException($"function {fn.Name}: trigger type {fn.TriggerType} is not supported by exthost");
            }
        }
        return new Emitted(type.CreateType(), http);
    }

    static string Required(Newtonsoft.Json.Linq.JObject binding, string property, WorkerFunction fn) =>
        binding.Value<string>(property) ?? throw new InvalidOperationException($"function {fn.Name}: the trigger has no {property}");

    static CustomAttributeBuilder Attribute<T>(object[] ctorArgs, params (string Name, object? Value)[] properties) where T : Attribute
    {
        var ctor = typeof(T).GetConstructor(ctorArgs.Select(a => a.GetType()).ToArray())
            ?? throw new MissingMethodException(typeof(T).Name, ".ctor");
        var set = properties.Where(p => p.Value is not null).ToArray();
        return new CustomAttributeBuilder(ctor, ctorArgs,
            set.Select(p => typeof(T).GetProperty(p.Name) ?? throw new MissingMemberException(typeof(T).Name, p.Name)).ToArray(),
            set.Select(p => p.Value!).ToArray());
    }

    /// <summary>
    /// `static Task[&lt;object&gt;] name([attribute] T trigger[, IBinder binder]) => Bridge.X("name", trigger[, binder]);`
    /// </summary>
    static void Define(TypeBuilder type, string name, string bridgeMethod, Type triggerType, CustomAttributeBuilder? triggerAttribute, bool withBinder, bool manual = false)
    {
        var target = typeof(Bridge).GetMethod(bridgeMethod)!;
        Type[] parameters = withBinder ? [triggerType, typeof(IBinder)] : [triggerType];
        var method = type.DefineMethod(Sanitize(name), MethodAttributes.Public | MethodAttributes.Static, target.ReturnType, parameters);
        method.SetCustomAttribute(new CustomAttributeBuilder(typeof(FunctionNameAttribute).GetConstructor([typeof(string)])!, [name]));
        if (manual) method.SetCustomAttribute(new CustomAttributeBuilder(typeof(NoAutomaticTriggerAttribute).GetConstructor(Type.EmptyTypes)!, []));
        var trigger = method.DefineParameter(1, ParameterAttributes.None, manual ? "call" : "trigger");
        if (triggerAttribute is not null) trigger.SetCustomAttribute(triggerAttribute);
        if (withBinder) method.DefineParameter(2, ParameterAttributes.None, "binder");
        var il = method.GetILGenerator();
        il.Emit(OpCodes.Ldstr, name);
        il.Emit(OpCodes.Ldarg_0);
        if (withBinder) il.Emit(OpCodes.Ldarg_1);
        il.Emit(OpCodes.Call, target);
        il.Emit(OpCodes.Ret);
    }

    static string Sanitize(string name) => new(name.Select(c => char.IsLetterOrDigit(c) ? c : '_').ToArray());
}
